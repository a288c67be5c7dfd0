"""Worker processes that embed documents for the vector cache (:mod:`.vectors`, ADR 0033).

A contextual model embeds a few dozen documents a CPU-second, so the first semantic search of a
store with thousands of threads takes minutes; ``--jobs N`` spreads it over N processes. A
worker is started with ``spawn`` (no store, no open files, no threads inherited) and re-creates
the embedder from its **spec**: ``(factory, args)``, ``factory`` a ``"module:name"`` callable
that ``args`` (strings and numbers, such as a model folder) make the same embedder with
(:func:`embedder_spec` reads it from an embedder's optional ``spec`` attribute). An embedder
without one is embedded in the calling process.

A worker uses one BLAS thread (N processes on N cores, not N × cores threads): the environment
says so before numpy is imported (spawn), and numpy's OpenBLAS is told so when it is loaded
already (fork).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

__all__ = [
    "EmbedderSpec",
    "default_jobs",
    "embed_texts",
    "embedder_spec",
    "make_embedder",
    "mp_context",
    "start_worker",
]

EmbedderSpec = tuple[str, tuple[Any, ...]]
"""``("module:callable", args)``: ``callable(*args)`` makes the embedder again."""

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_EMBEDDER: Any = None


def default_jobs() -> int:
    """How many worker processes embed by default: one per core this process may use, at most
    8 (a model in each worker holds its weights: ~100 MB for MiniLM)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def embedder_spec(embedder: object) -> EmbedderSpec | None:
    """The embedder's spec (its optional ``spec`` attribute), checked for shape; None when it
    has none (it is then used in this process only)."""
    spec = getattr(embedder, "spec", None)
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], str)
        and ":" in spec[0]
        and isinstance(spec[1], tuple)
    ):
        return spec[0], spec[1]
    return None


def make_embedder(spec: EmbedderSpec) -> Any:
    """The embedder a spec names."""
    module, _, name = spec[0].partition(":")
    factory: Any = importlib.import_module(module)
    for part in name.split("."):
        factory = getattr(factory, part)
    return factory(*spec[1])


def _one_blas_thread() -> None:
    """Tell an OpenBLAS this process loaded already to use one thread (best effort)."""
    import ctypes
    import re

    try:
        with open("/proc/self/maps") as f:
            libs = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return
    for path in libs:
        with contextlib.suppress(OSError):
            lib = ctypes.CDLL(path)
            for name in (
                "scipy_openblas_set_num_threads64_",
                "openblas_set_num_threads64_",
                "openblas_set_num_threads",
            ):
                if hasattr(lib, name):
                    getattr(lib, name)(1)


def mp_context() -> Any:
    """Fork on Linux (fast, and no ``__main__`` to import again), spawn elsewhere."""
    import multiprocessing

    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def start_worker(spec: EmbedderSpec, parent: int) -> None:
    """A worker's start: one BLAS thread, Ctrl-C left to the parent (which stops the pool and
    says what was kept), death with the parent (Linux), then the embedder."""
    global _EMBEDDER
    for var in _THREAD_VARS:
        os.environ[var] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl: nothing to work for
            os._exit(1)
        if "numpy" in sys.modules:
            _one_blas_thread()
    _EMBEDDER = make_embedder(spec)


def embed_texts(texts: Sequence[str]) -> Any:
    """``texts`` embedded by this worker's embedder (float32 rows)."""
    import numpy as np

    return np.asarray(_EMBEDDER.embed(list(texts)), dtype=np.float32)
