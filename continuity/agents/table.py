"""The coding agents continuity archives: the one place that knows them.

Each adapter marks its threads' first frame (``thread_created``) with ``meta["source"]``, names
them with its prefix (``cc-<session id>``, ``codex-…``, ``gemini-…``, ``oc-…``; a sub-agent's
session ``<parent>.agent-<id>`` with its parent set), and records the agent's own compaction as
a checkpoint whose ``cut_rule_id`` starts with the agent's prefix. The listings, search, the
viewer, the MCP server and the restore read those marks through this table, so a new agent is
one row here.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "AGENTS",
    "Agent",
    "agent_for_source",
    "agent_label",
    "agent_named",
    "agent_of_session",
    "is_own_compaction",
    "is_subagent",
    "known_agent_names",
]


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


AGENTS: Final = (
    Agent("claude-code", "claude-code", "Claude Code", "cc-", ("claude_code_compact/",)),
    Agent("codex", "codex", "Codex", "codex-", ("codex_compact/",)),
    Agent("gemini", "gemini-cli", "Gemini CLI", "gemini-", ("gemini_cli_compress/",)),
    Agent("opencode", "opencode", "opencode", "oc-", ("opencode_compact/",)),
)
_BY_SOURCE: Final = {a.source: a for a in AGENTS}
_OWN_COMPACTIONS: Final = tuple(p for a in AGENTS for p in a.compactions)


def _key(name: str) -> str:
    return "-".join(name.strip().lower().replace("_", " ").split())


_BY_NAME: Final = {
    _key(alias): a for a in AGENTS for alias in (a.name, a.source, a.display, a.thread_prefix[:-1])
}


def agent_named(name: str) -> Agent | None:
    """The agent ``name`` names: its name, source or display name (any case), or its thread
    prefix (``cc``, ``oc``); None when it names none."""
    return _BY_NAME.get(_key(name))


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


def is_own_compaction(cut_rule_id: str) -> bool:
    """Whether a checkpoint records an agent's own compaction (which takes messages out of the
    agent's context), not one made by continuity."""
    return cut_rule_id.startswith(_OWN_COMPACTIONS)


def known_agent_names() -> str:
    """The agents' names, for an error message: ``claude-code, codex, gemini, opencode``."""
    return ", ".join(a.name for a in AGENTS)
