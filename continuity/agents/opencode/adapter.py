"""opencode's adapter (:class:`~continuity.agents.contract.AgentAdapter`).

Its sources are opencode's SQLite stores (``opencode*.db``, read-only) and its legacy
``storage/`` tree in its data folder, and ``opencode export`` files (:mod:`.source`); its parser
is :mod:`.ingest`; it has no command hooks: the capture plugin (``plugin/continuity.js``, put in
its plugin folder by :mod:`.install`) runs ``continuity hook <event> --agent opencode --session
<id>`` on the session's events; its own compaction is archived as a checkpoint
``opencode_compact/…``. The restore reaches the model through the plugin's
``experimental.session.compacting`` hook, which adds to the compaction's own context that the
session is archived whole and the MCP tools find what its summary leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from continuity.agents.base.losses import Losses
from continuity.agents.base.report import count, said_with
from continuity.agents.contract import Done, Opener, Progress, Scope
from continuity.agents.table import OPENCODE, Agent
from continuity.errors import CommandRefused, ContinuityError, UnreadableSession

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.paths import StoreLocation

__all__ = ["ADAPTER", "OpencodeAdapter"]

_EVENTS: Final = {
    "session.idle": "session.idle",
    "session.compacted": "session.compacted",
    "session.error": "session.error",
    "session-event": "message.updated, tool.execute.after",
}


def _scope(scope: Scope) -> Literal["user", "project"]:
    if scope == "local":
        raise CommandRefused("opencode has no local scope (use user or project)")
    return "project" if scope == "project" else "user"


def _report(plans: list[InstallPlan], verb: str) -> list[str]:
    out = []
    for plan in plans:
        if not plan.changed:
            out.append(f"{plan.path}: unchanged")
        elif plan.after is None:
            out.append(f"{plan.path}: removed")
        else:
            out.append(f"{plan.path}: {verb}")
    return out


class OpencodeAdapter:
    """opencode (see the module's docstring)."""

    agent: Final[Agent] = OPENCODE
    restore_channel: Final = (
        "the plugin's experimental.session.compacting hook adds to the compaction's context "
        "that the session is archived whole, for the MCP tools"
    )
    scopes: Final[tuple[Scope, ...]] = ("user", "project")

    @property
    def hook_events(self) -> Mapping[str, str]:
        return _EVENTS

    def default_sources(self) -> list[Path]:
        from continuity.agents.opencode.source import default_sources

        return default_sources()

    def detect(self, path: Path) -> bool:
        from continuity.agents.opencode.source import open_source

        try:
            open_source(path)
        except (OSError, ValueError):
            return False
        return True

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        """Ingest opencode's sessions from ``paths`` (default: its data folder). With
        ``session`` (what the plugin runs at each event), only that session, and an unfinished
        last message is left for a later run; without, every session, each taken as it is."""
        from continuity.agents.opencode.ingest import IngestReport, ingest_session, ingest_source
        from continuity.agents.opencode.source import open_source

        sources = list(paths) or self.default_sources()
        if not sources:
            raise CommandRefused(
                "no opencode data found (opencode.db or storage/ under ~/.local/share/opencode)"
            )
        opened = store()
        total = IngestReport("")
        losses = Losses()
        found = False
        refused: list[Exception] = []
        for path in sources:
            try:
                src = open_source(path)
            except UnreadableSession as exc:  # not opencode's, or damaged from its first page
                refused.append(exc)
                continue
            except OSError as exc:
                raise said_with(exc, f" (in {path})") from exc
            try:
                if session is None:
                    total.add(ingest_source(opened, src, final=True))
                    found = True
                elif src.session(session) is not None:
                    total.add(ingest_session(opened, src, session, final=False))
                    found = True
                    break
            except UnreadableSession as exc:  # a damaged source: the others are read
                losses.add_file(path, str(exc).removeprefix(f"{path}: "))
            except (ContinuityError, OSError) as exc:
                raise said_with(exc, f" (in {path})") from exc
        if refused and len(refused) == len(sources):
            raise CommandRefused(str(refused[0])) from None
        for said in map(str, refused):
            losses.add_file(said.split(": ", 1)[0], said.split(": ", 1)[-1])
        if not found and session is None and losses:
            found = True  # every source damaged: said below as what was lost
        if not found:
            where = ", ".join(str(p) for p in sources)
            raise CommandRefused(f"no opencode session {session!r} in {where}")
        done = Done(
            out=[
                f"ingested {count(total.sessions, 'opencode session')} into "
                f"{count(len(total.threads), 'thread')}: {count(total.messages, 'new message')}, "
                f"{count(total.checkpoints, 'compaction')}, {total.duplicates} already archived"
                + (f", {total.unchanged} unchanged" if total.unchanged else "")
                + (
                    f", {total.held_back} with an unfinished message left for later"
                    if total.held_back
                    else ""
                )
            ]
        )
        losses.add_parts("record", total.lost, total.lost_at)
        if losses:
            done.failed = losses.line()
        return done

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        from continuity.agents.opencode.hooks import main

        return main(argv, store=store)

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        from continuity.agents.opencode.install import plan_opencode_install

        return plan_opencode_install(_scope(scope), project, store, mcp=mcp)

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        from continuity.agents.opencode.install import plan_opencode_uninstall

        return plan_opencode_uninstall(_scope(scope), project, mcp=mcp)

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

        plans = self.plan_install(scope, project, store, mcp=mcp)
        if dry_run:
            return Done(
                out=[p.diff() or f"{p.path}: already installed, nothing to change" for p in plans]
            )
        for plan in plans:
            apply_plan(plan)
        out = _report(plans, "continuity's plugin and MCP server entry written")
        out.append("opencode loads the plugin and the MCP server when it next starts")
        return Done(out=out)

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        from continuity.agents.base.install import apply_plan

        plans = self.plan_uninstall(scope, project, mcp=mcp)
        if dry_run:
            return Done(
                out=[
                    p.diff() or f"{p.path}: nothing of continuity's, nothing to change"
                    for p in plans
                ]
            )
        for plan in plans:
            apply_plan(plan)
        return Done(out=_report(plans, "continuity's entry removed"))


ADAPTER: Final = OpencodeAdapter()
