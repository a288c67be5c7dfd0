"""Integrations with agent runtimes' own storage interfaces (optional extras).

Each module here imports its runtime's package and is imported only by whoever uses it:
``import continuity`` never loads them.

- :mod:`continuity.integrations.langgraph` — a LangGraph checkpoint saver
  (the ``langgraph`` extra).
- :mod:`continuity.integrations.openai_agents` — OpenAI Agents SDK sessions
  (the ``openai-agents`` extra).
- :mod:`continuity.integrations.anthropic_memory` — Claude's memory tool on a thread's records
  (the ``anthropic`` extra).
"""
