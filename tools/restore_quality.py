"""Restore quality: how much of what came before Claude's compaction the restore names.

    python -m tools.restore_quality [--json] [paths…]

With no paths, every transcript under ``../shared/fixtures/claude-code`` holding a
``compact_boundary`` line (without the fixtures it says so and exits 0). For each transcript:

1. Cut it at its first ``compact_boundary`` (a ``system`` line with that subtype).
2. From the main chain (``isSidechain`` false) before the cut, collect four sets:

   * **edited** — ``file_path`` (or ``notebook_path``) of Edit, Write, MultiEdit and NotebookEdit
     calls;
   * **read** — ``file_path`` of Read calls;
   * **commands** — distinct Bash commands (tools ``Bash``/``bash``): first line, first 80 chars;
   * **prompts** — what the user typed: ``user`` lines that are not ``isMeta``, not
     ``isCompactSummary``, and carry text (a string, or ``text`` blocks — a line holding a
     ``tool_result`` is a tool's output, not a prompt). Claude Code's wrappers are removed
     first (``<command-name>``, ``<command-message>``, ``<command-args>``,
     ``<local-command-stdout>``/``-stderr``, ``<system-reminder>`` blocks, lines starting with
     ``Caveat:`` or ``[Request interrupted``); what is left, whitespace collapsed, is the prompt
     (none when nothing is left). A line starting with ``<task-notification>`` (a background
     task's end, written by Claude Code as a user line) is no prompt. Distinct prompts only.

3. Produce the restore as Claude Code would, through the real hooks (:func:`run_hook`) on a
   temporary store: the part before the cut is written to ``<tmp>/<session>.jsonl`` (subagent
   transcripts beside it are copied), ``pre-compact`` runs (its guidance length is reported),
   the boundary and Claude's summary line are appended, then ``session-start`` with source
   ``compact`` prints the restore.

Coverage of a text is, for each set, the share of its items the text mentions, on texts whose
whitespace is collapsed: a file when its base name appears, a command when its first 40
characters appear, a prompt when its first 40 characters appear (the whole prompt if shorter).
An empty set has no coverage (``null``/``—``). Reported for the restore alone, Claude's summary
alone (the ``isCompactSummary`` line after the cut), and both together, with the restore's length
against ``restore_max_chars``. It reports; it does not judge: the exit status is 0 whatever the
figures (tests/agents/claude_code/test_restore_quality.py checks the structure and the budget).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
FIXTURES: Final = (ROOT / ".." / "shared" / "fixtures" / "claude-code").resolve()
SETS: Final = ("edited", "read", "commands", "prompts")
TEXTS: Final = ("restore", "summary", "both")
EDIT_TOOLS: Final = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
COMMAND_TOOLS: Final = frozenset({"Bash", "bash"})
COMMAND_KEY_CHARS: Final = 80
MATCH_CHARS: Final = 40

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

_WRAPPER_BLOCK: Final = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-stdout"
    r"|local-command-stderr)>.*?</\1>",
    re.S,
)
_NOISE_LINE: Final = ("Caveat:", "[Request interrupted", "<system-reminder>", "</system-reminder>")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def is_boundary(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def first_boundary(objs: Sequence[dict[str, Any]]) -> int | None:
    return next((i for i, o in enumerate(objs) if is_boundary(o)), None)


def _content(obj: dict[str, Any]) -> Any:
    message = obj.get("message")
    return message.get("content") if isinstance(message, dict) else None


def prompt_text(obj: dict[str, Any]) -> str:
    """The user's own words in a transcript line ("" when it holds none)."""
    if obj.get("type") != "user" or obj.get("isMeta") or obj.get("isCompactSummary"):
        return ""
    content = _content(obj)
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return ""
        texts = [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
    else:
        return ""
    text = "\n".join(texts)
    if text.lstrip().startswith("<task-notification>"):
        return ""
    text = _WRAPPER_BLOCK.sub("\n", text)
    kept = [
        line
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith(_NOISE_LINE)
    ]
    return _collapse(" ".join(kept))


def _tool_uses(objs: Iterable[dict[str, Any]]) -> Iterable[tuple[str, dict[str, Any]]]:
    for obj in objs:
        if obj.get("type") != "assistant" or obj.get("isSidechain"):
            continue
        content = _content(obj)
        if not isinstance(content, list):
            continue
        for block in content:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and isinstance(block.get("input"), dict)
            ):
                yield str(block.get("name")), block["input"]


def collect(objs: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """The four sets of the main chain in ``objs`` (each in first-seen order, distinct)."""
    sets: dict[str, dict[str, None]] = {name: {} for name in SETS}
    for name, tool_input in _tool_uses(objs):
        if name in EDIT_TOOLS or name == "Read":
            path = tool_input.get("file_path") or tool_input.get("notebook_path")
            if isinstance(path, str) and path.strip():
                sets["edited" if name in EDIT_TOOLS else "read"][path.strip()] = None
        elif name in COMMAND_TOOLS:
            command = tool_input.get("command")
            if isinstance(command, str) and command.strip():
                first = command.strip().splitlines()[0].strip()[:COMMAND_KEY_CHARS]
                sets["commands"][first] = None
    for obj in objs:
        if not obj.get("isSidechain") and (text := prompt_text(obj)):
            sets["prompts"][text] = None
    return {name: list(items) for name, items in sets.items()}


def needle(kind: str, item: str) -> str:
    """What must appear in a text for ``item`` of set ``kind`` to count as mentioned."""
    if kind in ("edited", "read"):
        return item.rstrip("/").rsplit("/", 1)[-1]
    return _collapse(item)[:MATCH_CHARS]


def coverage(sets: dict[str, list[str]], text: str) -> dict[str, float | None]:
    flat = _collapse(text)
    out: dict[str, float | None] = {}
    for kind in SETS:
        items = sets.get(kind, [])
        out[kind] = (
            sum(1 for item in items if needle(kind, item) in flat) / len(items) if items else None
        )
    return out


def summary_text(objs: Sequence[dict[str, Any]], after: int) -> str:
    """Claude's summary: the first ``isCompactSummary`` line after index ``after``."""
    for obj in objs[after + 1 :]:
        if obj.get("isCompactSummary"):
            content = _content(obj)
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def run_restore(path: Path, work: Path) -> dict[str, Any]:
    """Feed ``path`` to the real hooks around its first compaction; the texts they print."""
    from continuity.agents.claude_code.hooks import HookConfig, run_hook
    from continuity.store.jsonl import Store

    raw = path.read_bytes().splitlines(keepends=True)
    cut = first_boundary(parse_lines_keep(raw))
    assert cut is not None
    summary_at = next(
        (i for i in range(cut + 1, len(raw)) if _loads(raw[i]).get("isCompactSummary")), cut
    )
    project = work / "project"
    project.mkdir(parents=True)
    transcript = project / path.name
    sub = path.with_suffix("") / "subagents"
    if sub.is_dir():
        shutil.copytree(sub, project / path.stem / "subagents")
    transcript.write_bytes(b"".join(raw[:cut]))
    store = Store(work / "store", create=True, durable=False)
    try:
        payload = {"session_id": path.stem, "transcript_path": str(transcript), "cwd": str(work)}
        pre = run_hook(
            store, "pre-compact", {**payload, "hook_event_name": "PreCompact", "trigger": "auto"}
        )
        transcript.write_bytes(b"".join(raw[: summary_at + 1]))
        start = run_hook(
            store,
            "session-start",
            {**payload, "hook_event_name": "SessionStart", "source": "compact"},
        )
    finally:
        store.close()
    restore = ""
    if start.stdout:
        restore = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    return {
        "restore": restore,
        "guidance": pre.stdout,
        "max_chars": HookConfig().restore_max_chars,
    }


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def parse_lines_keep(raw: Sequence[bytes]) -> list[dict[str, Any]]:
    """One object per raw line (``{}`` for a line that is not a JSON object): indexes match."""
    return [_loads(line) for line in raw]


def measure(path: Path) -> dict[str, Any] | None:
    """The report of one transcript (None when it holds no compaction)."""
    objs = parse_lines_keep(path.read_bytes().splitlines())
    cut = first_boundary(objs)
    if cut is None:
        return None
    sets = collect(objs[:cut])
    summary = summary_text(objs, cut)
    with tempfile.TemporaryDirectory(prefix="restore-quality-") as tmp:
        produced = run_restore(path, Path(tmp))
    restore = produced["restore"]
    return {
        "path": str(path),
        "sizes": {kind: len(items) for kind, items in sets.items()},
        "restore_chars": len(restore),
        "summary_chars": len(summary),
        "guidance_chars": len(produced["guidance"]),
        "max_chars": produced["max_chars"],
        "coverage": {
            "restore": coverage(sets, restore),
            "summary": coverage(sets, summary),
            "both": coverage(sets, summary + "\n" + restore),
        },
    }


def fixture_transcripts(root: Path = FIXTURES) -> list[Path]:
    """Every transcript under ``root`` with a compaction (subagent files left out)."""
    return [
        p
        for p in sorted(root.rglob("*.jsonl"))
        if "subagents" not in p.parts and b'"compact_boundary"' in p.read_bytes()
    ]


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(reports: Sequence[dict[str, Any]]) -> str:
    head = (
        "| session | text | chars | edited | read | commands | prompts |\n"
        "|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for r in reports:
        name = Path(r["path"]).name[:12]
        sizes = r["sizes"]
        rows.append(f"| {name} | (set sizes) | | " + " | ".join(str(sizes[k]) for k in SETS) + " |")
        chars = {
            "restore": f"{r['restore_chars']:,} / {r['max_chars']:,}",
            "summary": f"{r['summary_chars']:,}",
            "both": "",
        }
        for text in TEXTS:
            cov = r["coverage"][text]
            rows.append(
                f"| {name} | {text} | {chars[text]} | "
                + " | ".join(_fmt(cov[k]) for k in SETS)
                + " |"
            )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths
    if not paths:
        if not FIXTURES.is_dir():
            print(f"no fixtures at {FIXTURES}: nothing to measure")
            return 0
        paths = fixture_transcripts()
    reports = [r for p in paths if (r := measure(p)) is not None]
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        print(table(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
