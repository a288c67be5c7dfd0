"""What a coding agent's adapter provides: the contract every adapter meets, built-in or not.

An adapter is one object (``ADAPTER`` in ``continuity/agents/<agent>/adapter.py``) that says,
for its agent:

- **who it is**: :attr:`AgentAdapter.agent`, its row of the agents table (name, the ``source``
  its threads' first frame records, display name, thread prefix, how its own compaction's
  checkpoints are marked);
- **its sources and how to recognise them**: :meth:`~AgentAdapter.default_sources` (where the
  agent keeps its sessions on this machine) and :meth:`~AgentAdapter.detect`;
- **its parser**: :meth:`~AgentAdapter.ingest` turns session files into threads, incrementally
  and idempotently (what ``continuity ingest --agent NAME`` runs);
- **its hook events and payloads**: :attr:`~AgentAdapter.hook_events` and
  :meth:`~AgentAdapter.hook` (what ``continuity hook EVENT --agent NAME`` runs, through the
  guarded runner of :mod:`continuity.agents.base.hook`);
- **its install targets**: :meth:`~AgentAdapter.plan_install` and
  :meth:`~AgentAdapter.plan_uninstall` (the files it changes, as plans a dry run prints, a
  backup keeps and an uninstall gives back byte for byte), and :meth:`~AgentAdapter.install` /
  :meth:`~AgentAdapter.uninstall` (the same, made, with what to tell the user);
- **how a restore reaches its model**: :attr:`~AgentAdapter.restore_channel`.

:mod:`continuity.agents.registry` finds adapters by name; :mod:`continuity.testing.agents` is
the contract suite every adapter passes (an outside adapter runs it too, as an outside store
runs :mod:`continuity.testing.store`). Nothing here imports an adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from continuity.errors import CommandInterrupted, CommandRefused

if TYPE_CHECKING:
    from continuity.agents.base.install import InstallPlan
    from continuity.agents.table import Agent
    from continuity.paths import StoreLocation
    from continuity.store.base import BaseStore

__all__ = [
    "AgentAdapter",
    "CommandInterrupted",
    "CommandRefused",
    "Done",
    "Opener",
    "Progress",
    "Scope",
]

Scope = Literal["user", "project", "local"]
"""Where an install goes: the user's own settings, a project's (committed), or a project's
local ones; an agent that lacks one refuses it (:class:`CommandRefused`)."""

Progress = Callable[[Sequence[Path], Callable[[Path], None]], None]
"""How a command runs ``one`` on each file (a progress bar on a terminal, a plain loop)."""
Opener = Callable[[], "BaseStore"]
"""Opens (creates) the store a command writes to: called once there is something to write, so
a command refused for its input leaves no store behind."""


@dataclass
class Done:
    """What a command did, as a user is told it: lines for stdout, lines for stderr, and the
    reason it failed when it did (the command then exits 1 after printing the lines)."""

    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    failed: str | None = None


@runtime_checkable
class AgentAdapter(Protocol):
    """A coding agent's adapter (see the module's docstring)."""

    @property
    def agent(self) -> Agent:
        """Its row of the agents table."""
        ...

    @property
    def hook_events(self) -> Mapping[str, str]:
        """The events ``continuity hook EVENT --agent NAME`` takes, each with the agent's own
        name for it (``{"session-start": "SessionStart", …}``)."""
        ...

    @property
    def restore_channel(self) -> str:
        """How continuity's restore reaches the model after the agent compacts (one
        sentence: which event, which field)."""
        ...

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """The install scopes the agent has."""
        ...

    def default_sources(self) -> list[Path]:
        """Where the agent keeps its sessions on this machine (what ``ingest`` reads when given
        no path); the folders or files that exist."""
        ...

    def detect(self, path: Path) -> bool:
        """Whether ``path`` is one of the agent's session files (or a folder of them)."""
        ...

    def ingest(
        self,
        store: Opener,
        paths: Sequence[Path],
        *,
        session: str | None = None,
        progress: Progress | None = None,
    ) -> Done:
        """Archive the sessions of ``paths`` (none: :meth:`default_sources`) into the store
        ``store()`` opens, incrementally and idempotently: running it again appends nothing
        new. ``session``: only that session (an agent whose sources hold many). Raises
        :class:`CommandRefused` when there is nothing to ingest."""
        ...

    def hook(
        self, argv: list[str], *, store: StoreLocation | None = None, stdin: bytes | None = None
    ) -> int:
        """Run one hook (``argv``: the event and the agent's own arguments); never fails the
        agent's session (see :mod:`continuity.agents.base.hook`). The exit code."""
        ...

    def plan_install(
        self, scope: Scope, project: Path | None, store: StoreLocation | None, *, mcp: bool
    ) -> list[InstallPlan]:
        """The changes ``install`` makes (``store``: the store to name in them, None for the
        default), computed before anything is written."""
        ...

    def plan_uninstall(self, scope: Scope, project: Path | None, *, mcp: bool) -> list[InstallPlan]:
        """The changes ``uninstall`` makes: the files from before the install where nothing
        else changed, else the files without continuity's entries."""
        ...

    def install(
        self,
        scope: Scope,
        project: Path | None,
        store: StoreLocation | None,
        *,
        mcp: bool,
        dry_run: bool = False,
    ) -> Done:
        """Make :meth:`plan_install` (print it with ``dry_run``) and say what was done."""
        ...

    def uninstall(
        self, scope: Scope, project: Path | None, *, mcp: bool, dry_run: bool = False
    ) -> Done:
        """Make :meth:`plan_uninstall` (print it with ``dry_run``) and say what was done."""
        ...
