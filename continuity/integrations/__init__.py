"""Integrations with agent runtimes' own storage interfaces (optional extras).

Each module here imports its runtime's package and is imported only by whoever uses it:
``import continuity`` never loads them.

- :mod:`continuity.integrations.langgraph` — a LangGraph checkpoint saver
  (``pip install 'agent-continuity[langgraph]'``).
- :mod:`continuity.integrations.openai_agents` — OpenAI Agents SDK sessions
  (``pip install 'agent-continuity[openai-agents]'``).
"""
