"""The coding agents continuity archives: the one place that knows them.

Each adapter marks its threads' first frame (``thread_created``) with ``meta["source"]``, names
them with its prefix (``cc-<session id>``, ``codex-…``, ``gemini-…``, ``oc-…``; a sub-agent's
session ``<parent>.agent-<id>`` with its parent set), and records the agent's own compaction as
a checkpoint whose ``cut_rule_id`` starts with the agent's prefix. The listings, search, the
viewer, the MCP server and the restore read those marks through this table, so a new agent is
one row here.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

__all__ = [
    "AGENTS",
    "CLAUDE_CODE",
    "CODEX",
    "GEMINI",
    "OPENCODE",
    "Agent",
    "agent_for_source",
    "agent_label",
    "agent_named",
    "agent_of_session",
    "is_own_compaction",
    "is_subagent",
    "key",
    "known_agent_names",
    "known_agents",
    "register_agent",
    "thread_kind",
    "unregister_agent",
]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.:@+=-]")
_ID_PART: Final = 56
"""The longest part of a thread id made from an agent's own ids: ``cc-<56>.agent-<56>`` stays
within the store's 128-character limit."""


def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part)[:_ID_PART] or "unknown"


class Agent(NamedTuple):
    name: str
    """What ``--agent`` takes and JSON says (``agent``): ``claude-code``, ``codex``, …"""
    source: str
    """``meta["source"]`` of its threads' first frame."""
    display: str
    """How the faces name it: ``Claude Code``, ``Codex``, …"""
    thread_prefix: str
    """Its threads' ids start with this."""
    compactions: tuple[str, ...]
    """The ``cut_rule_id`` prefixes of its own compaction's checkpoints."""
    adapter: str = ""
    """Its adapter (``module:attribute``, :mod:`continuity.agents.contract`): what the agent
    commands use, found by :mod:`continuity.agents.registry`."""
    hook: str = ""
    """What ``continuity hook EVENT --agent NAME`` runs (``module:function``, called as
    ``function(argv, store=…, stdin=…)``): imported by the hook dispatch alone, without the
    adapter, so that a hook process starts fast. Empty: the adapter's ``hook``."""
    quick: str = ""
    """A module that answers a hook with nothing new to archive before the store is opened
    (``QUICK_EVENTS``, ``FULL_ENV``, ``MAX_STDIN``, ``nothing_new(event, raw, location)``), or
    empty."""

    def thread_id(self, session_id: str) -> str:
        """The thread of one of its sessions: ``<prefix><session id>``, the id's characters
        that a thread id cannot hold replaced by ``_``."""
        return f"{self.thread_prefix}{_safe(session_id)}"

    def subagent_thread_id(self, parent_session: str, session_id: str) -> str:
        """The thread of a sub-agent's session ``session_id`` started by ``parent_session``:
        ``<prefix><parent>.agent-<session>``."""
        return f"{self.thread_id(parent_session)}.agent-{_safe(session_id)}"


CLAUDE_CODE: Final = Agent(
    "claude-code",
    "claude-code",
    "Claude Code",
    "cc-",
    ("claude_code_compact/",),
    adapter="continuity.agents.claude_code.adapter:ADAPTER",
    hook="continuity.agents.claude_code.hooks:main",
    quick="continuity.agents.claude_code.quick",
)
CODEX: Final = Agent(
    "codex",
    "codex",
    "Codex",
    "codex-",
    ("codex_compact/",),
    adapter="continuity.agents.codex.adapter:ADAPTER",
    hook="continuity.agents.codex.hooks:main",
)
GEMINI: Final = Agent(
    "gemini",
    "gemini-cli",
    "Gemini CLI",
    "gemini-",
    ("gemini_cli_compress/",),
    adapter="continuity.agents.gemini.adapter:ADAPTER",
    hook="continuity.agents.gemini.hooks:main",
)
OPENCODE: Final = Agent(
    "opencode",
    "opencode",
    "opencode",
    "oc-",
    ("opencode_compact/",),
    adapter="continuity.agents.opencode.adapter:ADAPTER",
    hook="continuity.agents.opencode.hooks:main",
)
AGENTS: Final = (CLAUDE_CODE, CODEX, GEMINI, OPENCODE)
"""The built-in agents. An outside package's agent joins them when its adapter is registered
(:func:`register_agent`, which :mod:`continuity.agents.registry` calls)."""
_BY_SOURCE: Final = {a.source: a for a in AGENTS}
_OWN_COMPACTIONS: list[str] = [p for a in AGENTS for p in a.compactions]


def key(name: str) -> str:
    """How a name is compared: case, ``_`` and spaces do not matter (``Gemini CLI`` is
    ``gemini-cli``)."""
    return "-".join(name.strip().lower().replace("_", " ").split())


def _aliases(agent: Agent) -> tuple[str, ...]:
    return (agent.name, agent.source, agent.display, agent.thread_prefix[:-1])


_BY_NAME: Final = {key(alias): a for a in AGENTS for alias in _aliases(a)}
_KNOWN: list[Agent] = list(AGENTS)


def register_agent(agent: Agent) -> None:
    """Add an outside agent's row (or replace the row of the same name): the listings, search,
    the viewer and the restore then know its threads in this process."""
    for alias in _aliases(agent):
        _BY_NAME[key(alias)] = agent
    _BY_SOURCE[agent.source] = agent
    names = [a.name for a in _KNOWN]
    if agent.name in names:  # in its place: the order agents are listed in never changes
        _KNOWN[names.index(agent.name)] = agent
    else:
        _KNOWN.append(agent)
    _OWN_COMPACTIONS[:] = [p for a in _KNOWN for p in a.compactions]


def unregister_agent(name: str) -> None:
    """Forget an outside agent's row (a built-in's stays): what a test that registered one
    does when it ends."""
    agent = _BY_NAME.get(key(name))
    if agent is None or agent in AGENTS:
        return
    for alias in _aliases(agent):
        _BY_NAME.pop(key(alias), None)
    _BY_SOURCE.pop(agent.source, None)
    _KNOWN[:] = [a for a in _KNOWN if a.name != agent.name]
    _OWN_COMPACTIONS[:] = [p for a in _KNOWN for p in a.compactions]


def known_agents() -> tuple[Agent, ...]:
    """The built-in agents and those registered in this process."""
    return tuple(_KNOWN)


def agent_named(name: str) -> Agent | None:
    """The agent ``name`` names: its name, source or display name (any case), or its thread
    prefix (``cc``, ``oc``); None when it names none."""
    return _BY_NAME.get(key(name))


def agent_for_source(source: str) -> Agent | None:
    """The agent whose threads record ``source`` as theirs (None: not an agent's thread)."""
    return _BY_SOURCE.get(source)


def agent_label(source: str) -> str:
    """How to name the writer of a thread whose source is ``source``: the agent's display
    name, else the source itself, else ``-``."""
    agent = _BY_SOURCE.get(source)
    return agent.display if agent is not None else source or "-"


def agent_of_session(thread_id: str, source: str) -> Agent | None:
    """The agent of a thread that is one of its sessions (or sub-agent sessions): its source is
    the agent's and its id has the agent's prefix. None for any other thread."""
    agent = _BY_SOURCE.get(source)
    return agent if agent is not None and thread_id.startswith(agent.thread_prefix) else None


def is_subagent(thread_id: str, parent_thread_id: str | None) -> bool:
    """Whether an agent's session is a sub-agent's (a parent, or ``.agent-`` in its id)."""
    return parent_thread_id is not None or ".agent-" in thread_id


def thread_kind(thread_id: str, created: bool, source: str, parent_thread_id: str | None) -> str:
    """What ``continuity threads`` calls a thread: ``<source> session`` or ``<source>
    subagent`` for an agent's threads, else the ``source`` its creator recorded, or ``other``
    (``created``: its first frame is a ``thread_created``)."""
    if not created:
        return "other"
    if agent_for_source(source) is not None:
        sub = is_subagent(thread_id, parent_thread_id)
        return f"{source} subagent" if sub else f"{source} session"
    return source or "other"


def is_own_compaction(cut_rule_id: str) -> bool:
    """Whether a checkpoint records an agent's own compaction (which takes messages out of the
    agent's context), not one made by continuity."""
    return cut_rule_id.startswith(tuple(_OWN_COMPACTIONS))


def known_agent_names() -> str:
    """The agents' names, for an error message: ``claude-code, codex, gemini, opencode``."""
    return ", ".join(a.name for a in _KNOWN)
