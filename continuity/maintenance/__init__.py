"""Work on a whole store: checking it, rebuilding its caches, counting it, moving it.

- :mod:`.verify` — ``continuity verify``: every log's chain and seqs, artifacts, and every
  cache compared with what the log makes (ADR 0014);
- :mod:`.bulk` — ``verify`` and ``rebuild-index`` of many threads on worker processes, each
  merged into the bytes one process writes (ADR 0030);
- :mod:`.stats` — ``continuity stats``: counts and sizes, from the catalog (ADR 0028);
- :mod:`.migrate` — ``continuity migrate``: a store copied into another backend, byte for byte.

They sit above search and the context layer (they check and rebuild those caches) and know a
store only through its interface. Nothing is imported here.
"""
