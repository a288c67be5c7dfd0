"""The real agent clients (pinned in ``tools/agents.py``, installed from npm), with continuity
installed as a user has it, against the scripted model server: Claude Code (hooks, MCP, the
plugin), Codex, Gemini CLI, opencode, and the MCP Inspector on ``continuity mcp``."""
