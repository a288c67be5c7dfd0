"""An embedder as slow as a contextual model, for the vector cache's tests and benchmark.

:class:`SlowEmbedder` gives :class:`~continuity.retrieval.embedders.HashedEmbedder`'s vectors
(under its own id) and burns ``seconds`` of CPU per document first (a busy loop, not a sleep:
two workers on a loaded machine must compete for cores the way a real model does). It has a
``spec``, so worker processes make it again; with ``log`` each ``embed`` call appends the
number of texts it got to that file (one line per call, from any process), so a test can count
what was embedded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from continuity.retrieval.embedders import HashedEmbedder


class SlowEmbedder:
    def __init__(self, seconds: float = 0.005, dim: int = 64, log: str = "") -> None:
        self.seconds = seconds
        self.dim = dim
        self.log = log
        self.inner = HashedEmbedder(dim)

    @property
    def id(self) -> str:
        return f"slow-test/{self.dim}"

    @property
    def spec(self) -> tuple[str, tuple[float, int, str]]:
        return "tests.support.slow_embedder:SlowEmbedder", (self.seconds, self.dim, self.log)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.log:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{len(texts)}\n".encode())
            finally:
                os.close(fd)
        until = time.process_time() + self.seconds * len(texts)
        while time.process_time() < until:
            pass
        return self.inner.embed(texts)


def embedded(log: str) -> list[int]:
    """The size of every ``embed`` call logged to ``log`` (none: [])."""
    try:
        with open(log) as f:
            return [int(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
