"""The coding agents' adapters by name: the built-ins registered the way an outside package
registers its own.

An outside package adds an agent with an entry point in the ``continuity.agents`` group whose
value is its adapter (an object meeting :class:`~continuity.agents.contract.AgentAdapter`)::

    [project.entry-points."continuity.agents"]
    aider = "continuity_aider.adapter:ADAPTER"

``continuity ingest --agent aider``, ``install aider`` and ``hook EVENT --agent aider`` then find
it. Entry points are read only for a name the registry does not know (once per process), so a
hook of a built-in agent never scans the installed packages. Loading an adapter adds its row to
the agents table (:func:`continuity.agents.table.register_agent`): the listings, search and the
restore know its threads from then on in that process.
"""

from __future__ import annotations

from typing import Final

from continuity.agents.contract import AgentAdapter
from continuity.agents.table import AGENTS, agent_named, key, register_agent
from continuity.registry import Registry, UnknownName

__all__ = ["ADAPTERS", "adapter", "adapters", "find", "register", "unregister"]


def _canonical(name: str) -> str:
    agent = agent_named(name)
    return agent.name if agent is not None else key(name)


def _checked(obj: object) -> AgentAdapter:
    if not isinstance(obj, AgentAdapter):
        raise TypeError(f"{obj!r} is not an agent adapter (continuity.agents.contract)")
    register_agent(obj.agent)
    return obj


ADAPTERS: Final[Registry[AgentAdapter]] = Registry(
    "agent",
    "continuity.agents",
    {agent.name: agent.adapter for agent in AGENTS},
    key=_canonical,
    check=_checked,
)


def adapter(name: str) -> AgentAdapter:
    """The adapter of the agent ``name`` names (any of its names: ``claude-code``, ``cc``,
    ``Gemini CLI``); :class:`~continuity.registry.UnknownName` names the known agents."""
    return ADAPTERS.get(name)


def adapters(*, installed: bool = False) -> list[AgentAdapter]:
    """Every registered adapter (imported), the built-ins first; ``installed``: the installed
    packages' too (reads their metadata)."""
    names = ADAPTERS.installed() if installed else ADAPTERS.names()
    return [ADAPTERS.get(n) for n in names]


def register(obj: AgentAdapter) -> None:
    """Register an adapter made at run time (a test's, a program's) under its agent's name."""
    ADAPTERS.register(_checked(obj).agent.name, obj)


def unregister(name: str) -> None:
    """Forget an outside agent's adapter and its row (a test's, when it ends); a built-in
    stays."""
    from continuity.agents.table import AGENTS, unregister_agent

    canonical = _canonical(name)
    if all(agent.name != canonical for agent in AGENTS):
        ADAPTERS.unregister(canonical)
        unregister_agent(canonical)


def find(name: str) -> AgentAdapter | None:
    """:func:`adapter`, or None when no agent has that name."""
    try:
        return ADAPTERS.get(name)
    except UnknownName:
        return None
