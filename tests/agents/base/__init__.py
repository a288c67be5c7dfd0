"""The foundation every adapter builds on (``continuity.agents.base``): the line reader, bytecode
at install, MCP registration in every client's configuration, and the restore."""
