"""The truth: threads of chained frames, and the artifacts they point at.

- :mod:`.base` is the interface every backend implements (:class:`~.base.Thread`,
  :class:`~.base.BaseStore`), the batch rules they share (:func:`~.base.seal_batch`) and what
  the layers above may ask of a backend (:class:`~.base.LogReader`, ``cache_dir``,
  ``job_lock``);
- :mod:`.jsonl` is the embedded default: one JSONL file per thread (:class:`~.jsonl.Store`);
- :mod:`.memory` is the in-memory reference model (:class:`~.memory.MemoryStore`);
- :mod:`.postgres` is the same log on a PostgreSQL server, a package of its own
  (:class:`~.postgres.PostgresStore`; psycopg is imported only when one is opened);
- :mod:`.artifacts` holds immutable, content-addressed blobs, on disk or in memory;
- :mod:`.derived` is what a thread's derived data holds and how frames are sorted into it (part
  of the interface: the caches and PostgreSQL's derived tables use the same sorting);
- :mod:`.catalog` is a thread's listing row and how a batch of frames adds to it (part of the
  interface: the file catalog's rows and PostgreSQL's catalog table are the same rows);
- :mod:`.locate` opens the store a location names (a folder or a ``postgresql://`` URL).

The contract suites every backend must pass are in :mod:`continuity.testing`. Nothing is
imported here: import from the modules. The stores, ``open_store`` and the interface
(``BaseStore``, ``Thread``) are also at the package root (``from continuity import Store``).
"""
