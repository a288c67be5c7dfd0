"""Each adapter writes what the agents table (``continuity/agents/table.py``) says its agent's
threads look like: the faces (sessions, search --agent, the catalog's compaction count, the
restore's bounds) find an agent's sessions only through that table."""

from __future__ import annotations

from continuity.agents.codex import ingest as codex
from continuity.agents.gemini import ingest as gemini
from continuity.agents.opencode import ingest as opencode
from continuity.agents.table import agent_for_source, agent_named, is_own_compaction


def test_each_adapter_agrees_with_the_agents_table() -> None:
    cases = [
        ("codex", codex.SOURCE, codex.CUT_RULE),
        ("gemini", gemini.SOURCE, gemini.CUT_RULE),
        ("opencode", opencode.SOURCE_SYSTEM, opencode.CUT_RULE),
    ]
    for name, source, cut_rule in cases:
        agent = agent_named(name)
        assert agent is not None and agent_for_source(source) == agent, name
        assert is_own_compaction(cut_rule) and cut_rule.startswith(agent.compactions), name
