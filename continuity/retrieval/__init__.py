"""Everything search: terms, documents, indexes, ranking, vectors, fusion and leads.

The package is ``retrieval``, not ``search``: a submodule ``continuity.search`` would replace
the :func:`continuity.search` function on the package root the moment anything imported it
(ADR 0012). It is split in two by the context layer (``tests/project/test_layers.py``):

**Below** :mod:`continuity.context` — what compile's recall needs to rank one thread's prefix:

- :mod:`.stem` — the Snowball English stemmer, in pure Python (ADR 0032);
- :mod:`.terms` — text to terms: code-aware tokens, stems and surface forms;
- :mod:`.documents` — what of a frame is searchable, as a weighted bag of terms;
- :mod:`.segments` — the sealed inverted index format, and how segments merge (ADR 0011);
- :mod:`.index` — a thread's search index in ``cache/search/<thread>/``, with its watermark;
- :mod:`.state` — what a ranking reads of a thread, held in the process and caught up
  (ADR 0022): from the index files, the log, or a backend's own tables;
- :mod:`.ranking` — BM25, exact and pruned; :class:`~.ranking.Hit`.

**Above** it — store-wide search and the semantic side:

- :mod:`.store_index` — the store-wide index in ``cache/search-store/`` (ADR 0029);
- :mod:`.search` — :func:`~.search.search` across a store and
  :func:`~.search.search_prefix` within a thread's prefix, with snippets and leads;
- :mod:`.embedders` — the :class:`~.embedders.Embedder` protocol and its two embedders;
- :mod:`.vectors` — the vector cache per model and cosine top-k (ADR 0033);
- :mod:`.fusion` — reciprocal rank fusion of BM25 and the vectors;
- :mod:`.models` — finding, loading and fetching a model;
- :mod:`.leads` — where a hit leads: a summary's range, a subagent's parent, one response
  (ADR 0034).

A PostgreSQL store keeps its own search tables (:mod:`continuity.store.postgres`, ADR 0026),
given this package's document rules (:func:`.documents.documents_of_lines`); the CLI's fast
path for a plain ``continuity search`` is :mod:`continuity.cli.fast_search`.

Nothing is imported here: the index needs numpy, which the hook path must not pay for.
"""
