"""The ``continuity`` command line: a thin shell over the library.

- :mod:`.app` is the root: the Typer app, the global ``--store`` option, and the command
  modules registered on it;
- :mod:`._common` is what every command module shares: opening the store, turning library
  errors into one line on stderr and exit 1, the options several commands take;
- :mod:`.store_commands` (init, append, log, verify, repair, rebuild-index,
  stats, threads),
  :mod:`.context_commands` (compile, checkpoint, compact, decisions),
  :mod:`.search_commands` (search) and :mod:`.agent_commands` (install, uninstall, ingest,
  sessions, hook, demo: every coding agent's, through its adapter) each define commands and a
  ``register(app)``; none imports the root;
- :mod:`.fast_search` runs a plain ``continuity search`` before typer is imported, and
  :mod:`._display` holds the one-line renderings both paths print;
- :mod:`.version` is the ``--version`` line (a bare ``continuity --version`` is answered before
  typer), and :mod:`.rich_help` imports typer's help renderer without the parts of rich the
  help does not use.

Nothing is imported here, so that ``continuity hook`` and the fast search (dispatched by
``continuity.__main__``) never pay for typer.
"""
