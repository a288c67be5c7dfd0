"""Codex's adapter (:class:`~continuity.agents.contract.AgentAdapter`).

Its sources are the rollouts under ``$CODEX_HOME`` (``~/.codex``): ``sessions/`` and
``archived_sessions/``, ``rollout-*.jsonl`` or ``.jsonl.zst``; its parser is :mod:`.rollout`
and :mod:`.ingest`; its hooks are command hooks in a ``hooks.json``, trusted in the user's
``config.toml`` (:mod:`.install`); its own compaction is a ``compacted`` line, archived as a
checkpoint ``codex_compact/…``. The restore reaches the model as the ``additionalContext`` of
the SessionStart hook Codex runs after it compacts (``source: "compact"``), or of the next
UserPromptSubmit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from continuity.agents.base.report import count, shown
from continuity.agents.contract import Done, Opener, Progress, Scope
from continuity.agents.table import CODEX, Agent
from continuity.errors import CommandRefused

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.agents.codex.install import CodexInstall
    from continuity.paths import StoreLocation

__all__ = ["ADAPTER", "CodexAdapter"]


def _scope(scope: Scope) -> Literal["user", "project"]:
    if scope not in ("user", "project"):
        raise CommandRefused(
            "Codex has a user and a project scope (--scope user or --scope project)"
        )
    return "project" if scope == "project" else "user"


def _diffs(plan: CodexInstall) -> list[str]:
    return [p.diff() or f"{p.path}: nothing to change" for p in plan.plans]


class CodexAdapter:
    """Codex (see the module's docstring)."""

    agent: Final[Agent] = CODEX
    restore_channel: Final = (
        "SessionStart (source compact) hookSpecificOutput.additionalContext, else the next "
        "UserPromptSubmit's"
    )
    scopes: Final[tuple[Scope, ...]] = ("user", "project")

    @property
    def hook_events(self) -> Mapping[str, str]:
        from continuity.agents.codex.hooks import EVENTS

        return EVENTS

    def default_sources(self) -> list[Path]:
        from continuity.agents.codex import codex_home

        return [codex_home() / "sessions", codex_home() / "archived_sessions"]

    def detect(self, path: Path) -> bool:
        from continuity.agents.codex import detect

        return detect(path)

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        from continuity.agents.codex import ingest_paths, rollouts

        if session is not None:
            raise CommandRefused("--session goes with --agent opencode")
        roots = list(paths) or self.default_sources()
        todo = list(rollouts(p for p in roots if p.exists()))
        if not todo:
            where = ", ".join(shown(p) for p in roots)
            raise CommandRefused(
                f"no Codex rollouts (rollout-*.jsonl, rollout-*.jsonl.zst) found in {where}"
            )
        from continuity.agents.base.losses import Losses

        opened = store()
        losses = Losses()
        failed = messages = checkpoints = unknown = 0
        for path in todo:
            try:
                (report,) = ingest_paths(opened, [path])
            except (OSError, ValueError) as exc:  # a file that is not zstd, an unreadable one
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                losses.add_file(path, why)
                failed += 1
                continue
            messages += report.messages
            checkpoints += report.checkpoints
            unknown += sum(report.unknown.values())
            losses.add_read(report.lost, report.lost_at)
            if report.cut:
                losses.add_part("cut file", f"{shown(path)} ({report.cut})")
        done = Done(
            out=[
                f"{count(len(todo) - failed, 'rollout')}: {count(messages, 'new message')}, "
                f"{count(checkpoints, 'compaction')}, {count(unknown, 'line')} of kinds kept as "
                "records"
            ],
        )
        if losses:
            done.failed = losses.line()
        return done

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        from continuity.agents.codex.hooks import main

        return main(argv, store=store, stdin=stdin)

    def _install_plan(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> CodexInstall:
        from continuity.agents.codex.install import plan_codex_install

        return plan_codex_install(_scope(scope), project, store, mcp=mcp)

    def _uninstall_plan(self, scope: Scope, project: Path | None, *, mcp: bool) -> CodexInstall:
        from continuity.agents.codex.install import plan_codex_uninstall

        return plan_codex_uninstall(_scope(scope), project, mcp=mcp)

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        return self._install_plan(scope, project, store, mcp=mcp).plans

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        return self._uninstall_plan(scope, project, mcp=mcp).plans

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
        from continuity.agents.codex.install import hooks_disabled, project_trusted

        plan = self._install_plan(scope, project, store, mcp=mcp)
        if dry_run:
            return Done(out=_diffs(plan))
        backups = [apply_plan(p) for p in plan.plans]
        out: list[str] = []
        hooks = plan.hooks
        if not hooks.changed:
            out.append(f"{hooks.path}: continuity's Codex hooks already there, nothing changed")
        else:
            out.append(f"installed continuity hooks in {hooks.path}")
        config = plan.config
        if config is not None and config.changed:
            what = "the hooks' trust" + (" and the MCP server `continuity`" if mcp else "")
            out.append(f"wrote {what} in {config.path}")
        for backup in backups:
            if backup is not None:
                out.append(f"previous {backup.name.split('.continuity')[0]} saved to {backup}")
        out.extend(report.line() for report in compile_bytecode())  # hooks then never compile
        off = hooks_disabled()
        if off is not None:
            out.append(f"Codex's hooks are turned off ({off}): set it to true for them to run")
        if scope == "project":
            base = hooks.path.parent.parent
            if not project_trusted(base):
                out.append(
                    f"Codex reads {hooks.path} only in a project it trusts: start `codex` in "
                    f"{base} once and trust it (or run `codex --trust` there)"
                )
        return Done(out=out)

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        from continuity.agents.base.install import apply_plan

        plan = self._uninstall_plan(scope, project, mcp=mcp)
        if dry_run:
            return Done(out=_diffs(plan))
        for p in plan.plans:
            apply_plan(p)
        out: list[str] = []
        for p in plan.plans:
            if not p.changed:
                out.append(f"{p.path}: nothing of continuity's, nothing changed")
            elif p.after is None:
                out.append(
                    f"removed continuity's entries: {p.path} held nothing else and was removed"
                )
            elif p.restores_backup:
                out.append(
                    f"removed continuity's entries: {p.path} is as it was before the install"
                )
            else:
                out.append(f"removed continuity's entries from {p.path}")
                if p.backup_differs:
                    out.append(
                        f"{p.path} changed since the install: the file before it is in {p.backup}"
                    )
        return Done(out=out)


ADAPTER: Final = CodexAdapter()
