"""Fault injection: integrity under misuse, faults and hostile input (issue 10).

One module per family, each runnable on its own (``python -m tools.faults.<family>``) and all of
them together (``python -m tools.faults``); see ``tools/faults/README.md``.

* ``writers`` — many processes appending to one thread while others read and rebuild caches.
* ``kills`` — SIGKILL of a durable writer and of rebuild-index, compact, ingest and install.
* ``corruption`` — damaged logs, artifacts and caches: does ``verify`` see it, do reads lie?
* ``hooks`` — malformed and hostile input to ``continuity hook <event>``.
* ``fulldisk`` — an append that does not fit on the disk.
"""
