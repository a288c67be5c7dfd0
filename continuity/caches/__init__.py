"""Derived data: indexes built from the log, each with a watermark, deletable at any time.

- :mod:`.thread_index` is each thread's seq→offset, message and checkpoint indexes
  (:class:`~.thread_index.ThreadIndex`): what makes compile O(k);
- :mod:`.marks` and :mod:`.live` answer records and retractions, and keep the projection a store
  without caches compiles from, in the process (ADR 0018);
- :mod:`.catalog` is the store catalog: one row per thread (frames, messages, checkpoints,
  project, times) that listings and stats read instead of every log (ADR 0028).

They live under the store's ``cache_dir`` and read the log through the store's public
interface (:meth:`~continuity.store.base.Thread.open_log`); a store without a ``cache_dir``
has none, and the layers above read its log instead. The search caches (a thread's search
index, the store-wide one, the vectors) are :mod:`continuity.retrieval`'s. Nothing is imported
here: the hook path imports only the modules it uses.
"""
