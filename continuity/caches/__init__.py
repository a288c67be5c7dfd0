"""Derived data: indexes built from the log, each with a watermark, deletable at any time.

- :mod:`.thread_index` is each thread's seq→offset, message and checkpoint indexes
  (:class:`~.thread_index.ThreadIndex`): what makes compile O(k);
- :mod:`.search_index` is each thread's inverted index over messages, observations and
  summaries (:class:`~.search_index.ThreadSearchIndex`), with the tokenizer;
- :mod:`.ranking` ranks documents of the search index by BM25 (exact, pruned), one thread's
  prefix (what compile's recall needs) or many threads; :mod:`.search_state` holds what a
  ranking reads per thread and process, caught up incrementally (ADR 0022);
- :mod:`.marks` and :mod:`.live` answer records and retractions, and keep the projection a store
  without caches compiles from, in the process (ADR 0018).

They live under the store's ``cache_dir`` and read the log through the store's public
interface (:meth:`~continuity.store.base.Thread.open_log`); a store without a ``cache_dir``
has none, and the layers above read its log instead. Nothing is imported here: the search
index needs numpy, which the hook path must not pay for.
"""
