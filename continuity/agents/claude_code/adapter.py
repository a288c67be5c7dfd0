"""Claude Code's adapter (:class:`~continuity.agents.contract.AgentAdapter`): what
``continuity ingest``, ``install``, ``uninstall`` and ``hook`` do for Claude Code.

Its sources are the transcripts under ``~/.claude/projects`` (a session's ``<id>.jsonl`` and its
sub-agents' ``subagents/agent-<id>.jsonl``), recognised by their first lines; its parser is
:mod:`.ingest` over :mod:`.transcript`; its hooks (:mod:`.hooks`) are command hooks in its
``settings.json`` (:mod:`.install`); its own compaction is a ``compact_boundary`` line and the
summary after it, archived as a checkpoint ``claude_code_compact/<trigger>``. The restore
reaches the model as the ``additionalContext`` of the SessionStart hook that follows a
compaction (or of the next UserPromptSubmit when that one did not deliver it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from continuity.agents.base.losses import Losses
from continuity.agents.base.report import count, mcp_installed, mcp_uninstalled, said_with, shown
from continuity.agents.contract import Done, Opener, Progress, Scope
from continuity.agents.table import CLAUDE_CODE, Agent
from continuity.errors import CommandInterrupted, CommandRefused, ContinuityError

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.agents.base.mcp import McpTarget
    from continuity.agents.claude_code.ingest import IngestReport
    from continuity.paths import StoreLocation
    from continuity.store.base import BaseStore

__all__ = ["ADAPTER", "ClaudeCodeAdapter", "is_transcript"]

_SNIFF_BYTES: Final = 1 << 16
_SNIFF_LINES: Final = 5


def _is_record(raw: bytes) -> bool:
    """Whether a line is a JSON object with a string ``type``, as every transcript line is."""
    import msgspec

    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        import json  # a lone surrogate escape or a broken byte: the tolerant reader's path

        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return False
    return isinstance(obj, dict) and isinstance(obj.get("type"), str)


_FIRST_LINE_MAX: Final = 64 << 20
"""How far past a first line too long to sniff the detector looks for the next line (the
reader's own cap on a line)."""


def is_transcript(path: Path) -> bool:
    """Whether ``path`` reads as a Claude Code transcript: one of its first lines is a
    transcript record, or it holds no line yet (a session that has not begun). Only its first
    64 KiB are read."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
        whole = len(head) < _SNIFF_BYTES or not f.read(1)
        if not whole and b"\n" not in head and not _starts_record(head):
            # One first line longer than the read that does not look like a record (damage,
            # deep nesting): judge by the lines after it, as the reader will read them.
            f.seek(len(head))
            skipped = len(head)
            while skipped < _FIRST_LINE_MAX:
                chunk = f.read(_SNIFF_BYTES)
                if not chunk:
                    return False
                skipped += len(chunk)
                at = chunk.find(b"\n")
                if at >= 0:
                    head = chunk[at + 1 :] + f.read(_SNIFF_BYTES)
                    whole = len(head) < _SNIFF_BYTES or not f.read(1)
                    break
            else:
                return False
    lines = head.split(b"\n")
    cut = None if whole else lines.pop()  # a line the read cut short
    seen = 0
    for raw in lines:
        if not raw.strip():
            continue
        if _is_record(raw):
            return True
        seen += 1
        if seen >= _SNIFF_LINES:
            return False
    if cut is not None and cut.strip():
        # A first line longer than the read (a pasted file, a large tool output): its start.
        return seen == 0 and _starts_record(cut)
    return seen == 0


def _starts_record(cut: bytes) -> bool:
    """Whether the start of a line longer than the read looks like a transcript record's."""
    return cut.lstrip().startswith(b"{") and b'"type"' in cut


def _transcripts(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_file():
            found.append(p.absolute())
        elif p.is_dir():
            files = sorted(p.rglob("*.jsonl"))
            # sessions before their subagents, so parents exist when children link to them
            found.extend(sorted(files, key=lambda f: ("subagents" in f.parts, str(f))))
        else:
            raise CommandRefused(f"no such file or folder: {shown(p)}")
    return found


def _sort_out(files: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The transcripts among ``files``, and the others with the reason each is skipped."""
    todo: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for f in files:
        try:
            if not stat.S_ISREG(f.stat().st_mode):  # a FIFO would hang the read
                skipped.append((f, "not a regular file"))
            elif is_transcript(f):
                todo.append(f)
            else:
                skipped.append((f, "not a Claude Code transcript"))
        except OSError as exc:
            skipped.append((f, f"cannot be read ({exc.strerror or exc})"))
    return todo, skipped


def _transcripts_to_ingest(paths: Sequence[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The transcripts under ``paths``, and the other files with why each is skipped; refused
    when there is no transcript to ingest."""
    files = _transcripts(paths)
    if not files:
        raise CommandRefused(f"no transcripts (*.jsonl) found in {', '.join(map(shown, paths))}")
    try:
        todo, skipped = _sort_out(files)
    except KeyboardInterrupt:
        raise CommandInterrupted("interrupted before anything was ingested") from None
    if not todo:
        if len(skipped) == 1:
            f, why = skipped[0]
            raise CommandRefused(f"{shown(f)}: {why}; nothing was ingested")
        raise CommandRefused(
            f"no Claude Code transcript among the {len(files)} files; nothing was ingested",
            [f"skipped {shown(f)}: {why}" for f, why in skipped],
        )
    return todo, skipped


def _same_file(name: object, path: Path) -> bool:
    if not isinstance(name, (str, bytes)):
        return False
    return Path(os.fsdecode(name)).resolve() == path.resolve()


class _IngestRun:
    """What ``continuity ingest`` did so far: the totals of its reports, and the files it could
    not read."""

    def __init__(self, store: BaseStore, of: int) -> None:
        self.store = store
        self.of = of
        self.done = 0
        self.current: Path | None = None
        self.totals = dict.fromkeys(
            ("messages", "checkpoints", "duplicates", "repeated", "bad", "oversize"), 0
        )
        self.threads: set[str] = set()
        self.failed: list[tuple[Path, str]] = []
        self.losses = Losses()
        """What could not be archived: the files that could not be read, the lines that
        could not, with where and why."""

    def one(self, f: Path) -> None:
        """Ingest one transcript. A file that cannot be read is skipped and named; trouble with
        the store stops the run."""
        from continuity.agents.base.lines import SKIPPED_OVERSIZE, UNREADABLE
        from continuity.agents.claude_code.ingest import ingest_transcript

        self.current = f
        r: IngestReport | None = None
        try:
            r = ingest_transcript(self.store, f, final=True)
        except UnicodeError:
            self._failed(f, "its name is not UTF-8; rename it to ingest it")
        except OSError as exc:
            if not _same_file(exc.filename, f):
                raise said_with(exc, self._where(f)) from exc
            self._failed(f, f"cannot be read: {exc.strerror or exc}")
        except ContinuityError as exc:
            raise said_with(exc, self._where(f)) from exc
        if r is not None:
            totals = self.totals
            totals["messages"] += r.messages
            totals["checkpoints"] += r.checkpoints
            totals["duplicates"] += r.duplicates
            totals["repeated"] += r.repeated
            totals["bad"] += sum(r.skipped.get(k, 0) for k in UNREADABLE)
            totals["oversize"] += r.skipped.get(SKIPPED_OVERSIZE, 0)
            self.threads.update(r.threads)
            self.losses.add_read(r.lost, r.lost_at)
        self.done += 1

    def _failed(self, f: Path, why: str) -> None:
        self.failed.append((f, why))
        self.losses.add_file(f, why)

    def _where(self, f: Path) -> str:
        return f" (in {shown(f)}; {self.done} of {self.of} transcripts done before it)"

    def summary(self) -> str:
        from continuity.agents.base.lines import MAX_LINE_BYTES

        totals = self.totals
        return (
            f"ingested {count(self.of - len(self.failed), 'transcript')} into "
            f"{count(len(self.threads), 'thread')}: "
            f"{count(totals['messages'], 'new message')}, "
            f"{count(totals['checkpoints'], 'compaction')}, "
            f"{totals['duplicates']} already archived, {totals['bad']} unreadable lines skipped"
            + (
                f", {count(totals['oversize'], 'line')} over the {MAX_LINE_BYTES >> 20} MiB "
                "line cap skipped (not archived)"
                if totals["oversize"]
                else ""
            )
            # Not "already archived": this run archived the first of them (a line a transcript
            # holds twice, by its id).
            + (
                f", {count(totals['repeated'], 'line')} repeating an earlier line of "
                "their transcript skipped"
                if totals["repeated"]
                else ""
            )
        )


def _each(todo: Sequence[Path], one: Callable[[Path], None]) -> None:
    for f in todo:
        one(f)


def _settings(scope: Scope, project: Path | None) -> tuple[Path, Path | None]:
    """The settings file of ``scope`` and the project folder its writes must stay in."""
    from continuity.agents.claude_code.install import project_folder, settings_path

    try:
        within = project_folder(scope, project)
    except OSError as exc:
        raise CommandRefused(str(exc)) from None
    return settings_path(scope, project), within


def _mcp_plan(
    scope: Scope, project: Path | None, store: StoreLocation | None
) -> tuple[McpTarget, InstallPlan]:
    from continuity.agents.base.mcp import mcp_target, plan_mcp_install, server_argv, server_entry

    target = mcp_target("claude-code", scope, project)
    return target, plan_mcp_install(target, server_entry("claude-code", server_argv(store)))


def _mcp_uninstall_plan(scope: Scope, project: Path | None) -> tuple[McpTarget, InstallPlan]:
    from continuity.agents.base.mcp import mcp_target, plan_mcp_uninstall

    target = mcp_target("claude-code", scope, project)
    return target, plan_mcp_uninstall(target)


class ClaudeCodeAdapter:
    """Claude Code (see the module's docstring)."""

    agent: Final[Agent] = CLAUDE_CODE
    restore_channel: Final = (
        "SessionStart (source compact) hookSpecificOutput.additionalContext, else the next "
        "UserPromptSubmit's"
    )
    scopes: Final[tuple[Scope, ...]] = ("user", "project", "local")

    @property
    def hook_events(self) -> Mapping[str, str]:
        from continuity.agents.claude_code.hooks import EVENTS

        return EVENTS

    def default_sources(self) -> list[Path]:
        return [Path.home() / ".claude" / "projects"]

    def detect(self, path: Path) -> bool:
        if path.is_dir():
            return any(True for f in path.rglob("*.jsonl") if _is_readable_transcript(f))
        return _is_readable_transcript(path)

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        if session is not None:
            raise CommandRefused("--session goes with --agent opencode")
        todo, skipped = _transcripts_to_ingest(paths or self.default_sources())
        # Like the hooks, an import creates the store: `install` then `ingest` needs no `init`.
        run = _IngestRun(store(), len(todo))
        try:
            (progress or _each)(todo, run.one)
        except KeyboardInterrupt:
            raise CommandInterrupted(
                f"interrupted while ingesting {shown(run.current or todo[0])} ({run.done} of "
                f"{count(len(todo), 'transcript')} done); what was archived is kept: "
                "run the same command again to resume"
            ) from None
        done = Done(
            out=[run.summary()],
            err=[f"skipped {shown(f)}: {why}" for f, why in skipped],
        )
        if run.losses:
            done.failed = run.losses.line()
        return done

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        from continuity.agents.claude_code.hooks import main

        return main(argv, store=store, stdin=stdin)

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        from continuity.agents.claude_code.install import plan_install

        path, within = _settings(scope, project)
        plans = [plan_install(path, store, within=within)]
        if mcp:
            plans.append(_mcp_plan(scope, project, store)[1])
        return plans

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        from continuity.agents.claude_code.install import plan_uninstall

        path, within = _settings(scope, project)
        plans = [plan_uninstall(path, within=within)]
        if mcp:
            plans.append(_mcp_uninstall_plan(scope, project)[1])
        return plans

    def install(
        self,
        scope: Scope,
        project: Path | None,
        store: StoreLocation | None,
        *,
        mcp: bool,
        dry_run: bool = False,
    ) -> Done:
        from continuity.agents.base.install import apply_plan, compile_bytecode
        from continuity.agents.claude_code.install import plan_install

        path, within = _settings(scope, project)
        plan = plan_install(path, store, within=within)
        # Both plans before anything is written: a file either refuses leaves both untouched.
        server = _mcp_plan(scope, project, store) if mcp else None
        done = Done()
        if dry_run:
            done.out.append(plan.diff() or f"{path}: already installed, nothing to change")
            if server is not None:
                target, mcp_plan = server
                done.out.append(mcp_plan.diff() or f"{target.path}: MCP server already registered")
            return done
        backup = apply_plan(plan)
        mcp_backup = apply_plan(server[1]) if server is not None else None
        if not plan.changed:
            done.out.append(f"{path}: already installed, nothing changed")
        else:
            done.out.append(f"installed continuity hooks in {path}")
            if backup is not None:
                done.out.append(f"previous settings saved to {backup}")
            elif plan.backup.is_file() and not plan.backup.is_symlink():
                done.out.append(f"the settings from before the first install stay in {plan.backup}")
        if server is not None:
            done.out.extend(mcp_installed(*server, mcp_backup))
        # Every install, changed or not: the package may have been upgraded since the last one.
        done.out.extend(report.line() for report in compile_bytecode())
        return done

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        from continuity.agents.base.install import apply_plan
        from continuity.agents.claude_code.install import plan_uninstall

        path, within = _settings(scope, project)
        plan = plan_uninstall(path, within=within)
        server = _mcp_uninstall_plan(scope, project) if mcp else None
        done = Done()
        if dry_run:
            done.out.append(plan.diff() or f"{path}: no continuity hooks, nothing to change")
            if server is not None:
                target, mcp_plan = server
                done.out.append(mcp_plan.diff() or f"{target.path}: no continuity MCP server")
            return done
        apply_plan(plan)
        if server is not None:
            apply_plan(server[1])
        if not plan.changed:
            done.out.append(f"{path}: no continuity hooks, nothing changed")
        elif plan.after is None:
            done.out.append(f"removed continuity hooks: {path} held nothing else and was removed")
        elif plan.restores_backup:
            done.out.append(f"removed continuity hooks: {path} is as it was before the install")
        else:
            done.out.append(f"removed continuity hooks from {path}")
            if plan.backup_differs:
                done.out.append(
                    f"the settings changed since the install: those from before it stay in "
                    f"{plan.backup}"
                )
        if server is not None:
            done.out.extend(mcp_uninstalled(*server))
        return done


def _is_readable_transcript(path: Path) -> bool:
    try:
        return path.suffix == ".jsonl" and path.is_file() and is_transcript(path)
    except OSError:
        return False


ADAPTER: Final = ClaudeCodeAdapter()
