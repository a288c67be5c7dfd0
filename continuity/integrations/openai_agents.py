"""OpenAI Agents SDK sessions kept in continuity threads (the `openai-agents` extra).

Two ``agents.memory.Session`` implementations, one thread per session id (ADR 0024)::

    from agents import Agent, Runner
    from continuity.integrations.openai_agents import CompiledSession, ContinuitySession

    session = ContinuitySession("support-42", "agent-store")      # every item, as added
    result = await Runner.run(agent, "Where is my order?", session=session)

    session = CompiledSession("support-42", "agent-store",       # summaries + recent window
                              compaction=TokenThreshold(8000))

- :class:`ContinuitySession` stores each Responses item the runner adds as one message frame,
  losslessly: ``get_items`` returns exactly what was added, in order. ``pop_item`` and
  ``clear_session`` retract (the log keeps everything).
- :class:`CompiledSession` is the same log, but ``get_items()`` returns the compiled history —
  the hierarchy of cumulative summaries and the bounded recent window — so a long-running agent
  never outgrows its context window; compaction runs on the cut rule you give it, with the
  summarizer you give it (an async LLM summarizer included).

The thread is an ordinary continuity thread: ``continuity log``, ``compile``, ``search`` and
``recall`` work on it as on any other. This module imports the Agents SDK; ``import continuity``
never imports this module.
"""

from __future__ import annotations

from continuity.integrations._openai_agents_session import (
    CompiledSession,
    ContinuitySession,
    StoreLike,
)

__all__ = ["CompiledSession", "ContinuitySession", "StoreLike"]
