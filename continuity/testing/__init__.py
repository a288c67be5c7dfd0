"""The contract suites every backend must pass, shipped so that any backend can run them.

A backend's test module subclasses each suite and says only how to build its store; pytest
collects the subclasses (their names start with ``Test``) and runs every inherited test::

    from continuity.testing import ArtifactStoreContract, ContextContract, StoreContract

    class TestMyStore(StoreContract):
        def make_store(self, path, clock):
            return MyStore(path, clock=clock)  # path: a fresh folder it may use

    class TestMyStoreContext(ContextContract):
        def make_store(self, path, clock):
            return MyStore(path, clock=clock)

    class TestMyArtifacts(ArtifactStoreContract):
        def make(self, tmp_path):
            return MyArtifactStore(tmp_path)

- :class:`StoreContract`: appends, batches, seqs, ``expected_seq``, the chain, reads, tails,
  thread ids, the same stored lines as the in-memory reference model, and what the layers above
  ask of a backend (``read_lines_backwards``, ``decode``, the log as bytes when it keeps a cache
  folder, the job lock).
- :class:`ContextContract`: compile (with and without caches, budgets, anchors, recall),
  compaction and search give the same bundles and hits as on the reference model.
- :class:`ArtifactStoreContract`: content addressing, idempotent puts, verified reads.

The helpers the suites use (:class:`FixedClock`, :func:`msg`, :func:`stored_lines`,
:func:`verify_chain`, :func:`drive_reference_batches`, :func:`build_conversation`) are
public too. This package needs pytest: import it from tests only.
"""

from continuity.testing.artifacts import ArtifactStoreContract
from continuity.testing.context import ContextContract, build_conversation
from continuity.testing.store import StoreContract
from continuity.testing.support import (
    FIXED_MS,
    INVALID_THREAD_IDS,
    VALID_THREAD_IDS,
    FixedClock,
    drive_reference_batches,
    msg,
    stored_lines,
    verify_chain,
)

__all__ = [
    "FIXED_MS",
    "INVALID_THREAD_IDS",
    "VALID_THREAD_IDS",
    "ArtifactStoreContract",
    "ContextContract",
    "FixedClock",
    "StoreContract",
    "build_conversation",
    "drive_reference_batches",
    "msg",
    "stored_lines",
    "verify_chain",
]
