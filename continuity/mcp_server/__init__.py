"""The MCP server: the agent's door into its own archive (``continuity mcp``, issue 28).

- :mod:`.schemas` names the tools, their descriptions for a model and their JSON input schemas
  (the contract the installers and clients rely on); no SDK;
- :mod:`.archive` is what every tool works on: the store, the project (the server's working
  directory), the current session (the hooks' note, :mod:`continuity.caches.live_session`),
  redaction of everything served, cursors and one-line errors;
- :mod:`.turns` renders frames as readable turns within a token budget;
- :mod:`.tools` is the five tools as plain functions over an :class:`~.archive.Archive`
  (``search``, ``read``, ``sessions``, ``restore``, ``remember``), tested and timed alone;
- :mod:`.jsonrpc` reads and writes JSON-RPC 2.0 lines (MCP's stdio transport), and
  :mod:`.server` speaks MCP over it (the handshake, the tool list, calls in a worker thread,
  cancellation, the archive and model loaded in the background); no SDK (ADR 0053), imported
  only by ``continuity mcp``.
"""
