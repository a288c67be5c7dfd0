"""Scribe's row: what the agents table says of it (its entry point loads the adapter, which
registers this row)."""

from __future__ import annotations

from typing import Final

from continuity.agents.table import Agent

SCRIBE: Final = Agent(
    "scribe",
    "scribe",
    "Scribe",
    "sc-",
    ("scribe_compact/",),
    adapter="tests.agents.fifth_agent.adapter:ADAPTER",
    hook="tests.agents.fifth_agent.hooks:main",
)
