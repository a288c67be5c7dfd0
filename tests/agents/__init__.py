"""The agents wing (``continuity.agents``): the agents table, the foundation every adapter builds
on (``base/``) and each agent's adapter (``claude_code/``, ``codex/``, ``gemini/``,
``opencode/``) on recorded sessions. The real agent clients run in ``tests/outside/clients/``."""
