"""Scribe's adapter: the whole of what continuity needs to know of a fifth agent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from continuity.agents.base.install import InstallPlan, apply_plan
from continuity.agents.base.report import count
from continuity.agents.contract import Done, Opener, Progress, Scope
from continuity.agents.table import Agent
from continuity.errors import CommandRefused
from continuity.paths import StoreLocation
from tests.agents.fifth_agent import hooks, install
from tests.agents.fifth_agent.agent import SCRIBE
from tests.agents.fifth_agent.ingest import detect, ingest_session


def _scope(scope: Scope) -> str:
    if scope == "local":
        raise CommandRefused("Scribe has a user and a project scope")
    return scope


class ScribeAdapter:
    agent: Final[Agent] = SCRIBE
    hook_events: Final[Mapping[str, str]] = hooks.EVENTS
    restore_channel: Final = "the context of its SessionStart hook's JSON answer after a compaction"
    scopes: Final[tuple[Scope, ...]] = ("user", "project")

    def default_sources(self) -> list[Path]:
        return [Path.home() / ".scribe" / "sessions"]

    def detect(self, path: Path) -> bool:
        return detect(path)

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        files = [
            f
            for p in (paths or self.default_sources())
            for f in ([p] if p.is_file() else sorted(p.glob("*.jsonl")))
            if detect(f)
        ]
        if not files:
            raise CommandRefused("no Scribe sessions found")
        opened = store()
        reports = [ingest_session(opened, f) for f in files]
        messages = sum(r.messages for r in reports)
        return Done(
            out=[f"{count(len(files), 'Scribe session')}: {count(messages, 'new message')}"]
        )

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        return hooks.main(argv, store=store, stdin=stdin)

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        return [install.plan_install(_scope(scope), project, store)]

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        return [install.plan_uninstall(_scope(scope), project)]

    def install(
        self,
        scope: Scope,
        project: Path | None,
        store: StoreLocation | None,
        *,
        mcp: bool,
        dry_run: bool = False,
    ) -> Done:
        plans = self.plan_install(scope, project, store, mcp=mcp)
        if dry_run:
            return Done(out=[p.diff() or f"{p.path}: nothing to change" for p in plans])
        for plan in plans:
            apply_plan(plan)
        return Done(out=[f"{p.path}: {'written' if p.changed else 'unchanged'}" for p in plans])

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        plans = self.plan_uninstall(scope, project, mcp=mcp)
        if dry_run:
            return Done(out=[p.diff() or f"{p.path}: nothing to change" for p in plans])
        for plan in plans:
            apply_plan(plan)
        return Done(out=[f"{p.path}: {'restored' if p.changed else 'unchanged'}" for p in plans])


ADAPTER: Final = ScribeAdapter()
