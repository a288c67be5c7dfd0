"""Gemini CLI's adapter (:class:`~continuity.agents.contract.AgentAdapter`).

Its sources are the sessions under ``~/.gemini/tmp/<project>/chats/`` (the whole-file
``session-*.json`` up to v0.38, the ``.jsonl`` from v0.39, sub-agents' recordings in
``chats/<parent>/``); its parser is :mod:`.records`, :mod:`.convert` and :mod:`.ingest`; its
hooks are command hooks in its ``settings.json`` (:mod:`.install`), which also registers the
MCP server; its own compression is archived as a checkpoint ``gemini_cli_compress/…``. The
restore reaches the model as the ``additionalContext`` of the BeforeAgent hook after a
compression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from continuity.agents.base.report import count
from continuity.agents.contract import Done, Opener, Progress, Scope
from continuity.agents.table import GEMINI, Agent
from continuity.errors import CommandRefused

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.paths import StoreLocation

__all__ = ["ADAPTER", "GeminiAdapter"]


def _target(scope: Scope, project: Path | None) -> tuple[Path, Path | None]:
    from continuity.agents.gemini.install import settings_path

    if scope == "local":
        raise CommandRefused("Gemini CLI has a user and a project scope (--scope user|project)")
    if scope == "user":
        return settings_path("user"), None
    base = (project or Path.cwd()).absolute()
    if not base.is_dir():
        raise CommandRefused(f"no project folder {base} (--project names an existing folder)")
    return settings_path("project", base), base


class GeminiAdapter:
    """Gemini CLI (see the module's docstring)."""

    agent: Final[Agent] = GEMINI
    restore_channel: Final = "BeforeAgent hookSpecificOutput.additionalContext after a compression"
    scopes: Final[tuple[Scope, ...]] = ("user", "project")

    @property
    def hook_events(self) -> Mapping[str, str]:
        from continuity.agents.gemini.hooks import EVENTS

        return {event: event for event in EVENTS}

    def default_sources(self) -> list[Path]:
        return [Path.home() / ".gemini" / "tmp"]

    def detect(self, path: Path) -> bool:
        from continuity.agents.gemini.ingest import detect

        return detect(path)

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        from continuity.agents.gemini.ingest import ingest_paths, session_files

        if session is not None:
            raise CommandRefused("--session goes with --agent opencode")
        roots = list(paths) or self.default_sources()
        opened = store()
        files = session_files(roots)
        if not files:
            raise CommandRefused(f"no Gemini CLI session files under {', '.join(map(str, roots))}")
        from continuity.agents.base.losses import Losses

        done = Done()
        losses = Losses()
        failed = messages = 0
        for path in files:
            try:
                report = ingest_paths(opened, [path], final=True)[0]
            except (OSError, ValueError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                losses.add_file(path, why)
                failed += 1
                continue
            messages += report.messages
            losses.add_read(report.lost, report.lost_at)
        done.out.append(
            f"ingested {count(len(files) - failed, 'Gemini CLI session')}: "
            f"{count(messages, 'new message')}"
        )
        if losses:
            done.failed = losses.line()
        return done

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        from continuity.agents.gemini.hooks import main

        return main(argv, store=store, stdin=stdin)

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        from continuity.agents.gemini.install import plan_install

        path, within = _target(scope, project)
        return [plan_install(path, store, mcp=mcp, within=within)]

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        """The hooks and the MCP server both (one file holds them): ``mcp`` changes nothing."""
        from continuity.agents.gemini.install import plan_uninstall

        path, within = _target(scope, project)
        return [plan_uninstall(path, within=within)]

    def install(
        self,
        scope: Scope,
        project: Path | None,
        store: StoreLocation | None,
        *,
        mcp: bool,
        dry_run: bool = False,
    ) -> Done:
        from continuity.agents.base.install import apply_plan

        (plan,) = self.plan_install(scope, project, store, mcp=mcp)
        if dry_run:
            return Done(out=[plan.diff() or f"{plan.path}: already installed, nothing to change"])
        backup = apply_plan(plan)
        if not plan.changed:
            return Done(out=[f"{plan.path}: already installed, nothing changed"])
        what = "hooks and MCP server" if mcp else "hooks"
        out = [f"installed continuity's {what} for Gemini CLI in {plan.path}"]
        if backup is not None:
            out.append(f"the settings from before the install are kept in {backup}")
        return Done(out=out)

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        from continuity.agents.base.install import apply_plan

        (plan,) = self.plan_uninstall(scope, project, mcp=mcp)
        path = plan.path
        if dry_run:
            return Done(out=[plan.diff() or f"{path}: nothing of continuity's, nothing to change"])
        apply_plan(plan)
        if not plan.changed:
            return Done(out=[f"{path}: nothing of continuity's, nothing changed"])
        if plan.restores_backup or plan.after is None:
            return Done(out=[f"removed continuity from {path}: it is as it was before the install"])
        return Done(out=[f"removed continuity's hooks and MCP server from {path}"])


ADAPTER: Final = GeminiAdapter()
