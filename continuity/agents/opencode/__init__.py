"""The opencode adapter: opencode's sessions archived as they happen.

- :mod:`.source` reads opencode's SQLite store (read-only), its legacy ``storage/`` tree and
  ``opencode export`` files;
- :mod:`.ingest` turns sessions into threads, incrementally and without duplicates, opencode's
  own compaction into a checkpoint;
- :mod:`.install` puts the capture plugin in opencode's plugin folder and registers
  ``continuity mcp`` in ``opencode.json`` (and takes both out again);
- ``plugin/continuity.js`` is that plugin: it runs ``continuity ingest --agent opencode
  --session <id>`` in the background on opencode's session events.

Nothing is imported here.
"""
