"""The agents' registry (continuity.agents.registry) over the agents table."""

from __future__ import annotations

import pytest

from continuity.agents import registry
from continuity.agents.table import AGENTS, known_agent_names, known_agents
from continuity.errors import UnknownName


def test_loading_the_built_in_adapters_keeps_the_agents_in_their_order() -> None:
    before = known_agent_names()
    registry.register(registry.adapter("claude-code"))  # the first row, registered again
    assert known_agents() == AGENTS
    assert known_agent_names() == before == "claude-code, codex, gemini, opencode"


def test_every_built_in_is_found_by_its_row_and_an_unknown_name_says_what_is_known() -> None:
    assert [a.agent for a in registry.adapters()] == list(AGENTS)
    assert registry.find("no-such-agent") is None
    with pytest.raises(UnknownName, match=r"continuity\.agents"):
        registry.adapter("no-such-agent")


def test_a_built_in_cannot_be_unregistered() -> None:
    registry.unregister("codex")
    assert registry.adapter("codex").agent.name == "codex"
    assert known_agents() == AGENTS
