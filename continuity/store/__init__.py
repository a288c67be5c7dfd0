"""The truth: threads of chained frames, and the artifacts they point at.

- :mod:`.base` is the interface every backend implements (:class:`~.base.Thread`,
  :class:`~.base.BaseStore`), the batch rules they share (:func:`~.base.seal_batch`) and what
  the layers above may ask of a backend (:class:`~.base.LogReader`, ``cache_dir``,
  ``job_lock``);
- :mod:`.jsonl` is the embedded default: one JSONL file per thread (:class:`~.jsonl.Store`);
- :mod:`.memory` is the in-memory reference model (:class:`~.memory.MemoryStore`);
- :mod:`.artifacts` holds immutable, content-addressed blobs, on disk or in memory.

The contract suites every backend must pass are in :mod:`continuity.testing`. Nothing is
imported here; the public names are also at the package root (``from continuity import Store``).
"""
