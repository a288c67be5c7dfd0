"""A backend's store-wide search index as a corpus (ADR 0041): what a server answers for a
query's terms — the runs of documents that hold them, across every thread of the scope, and
the scope's statistics — made into one :class:`~.ranking.Corpus` the ranking reads as it reads
the file index's (ADR 0029), so the hits are the same.

The corpus holds only the documents of the runs the server sent (their records, in thread id
order), numbered from 0; its statistics (documents, length sum) are the scope's, and each
term's document frequency is counted from its postings, every one of which the server sent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from continuity.retrieval.index import DOC_RECORD
from continuity.retrieval.ranking import Corpus
from continuity.store.base import WideRun, WideSearch

__all__ = ["WidePart", "wide_corpus"]

_Arrays = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]


class WidePart:
    """The sent documents as one part: each term's postings over them, ascending."""

    first_doc = 0

    def __init__(self, n_docs: int, postings: dict[str, _Arrays]) -> None:
        self.n_docs = n_docs
        self._postings = postings

    def postings(self, term: str) -> _Arrays:
        found = self._postings.get(term)
        if found is None:
            return np.zeros(0, np.uint32), np.zeros(0, np.uint16)
        return found

    def count(self, term: str, end: int) -> int:
        docs = self.postings(term)[0]
        return len(docs) if not len(docs) or int(docs[-1]) < end else int(docs.searchsorted(end))


def wide_corpus(found: WideSearch, terms: Sequence[str]) -> Corpus | None:
    """The corpus of what the server sent for ``terms`` (None: the scope has no document).
    :class:`ValueError` when the rows do not hold together (the index is damaged)."""
    if not found.docs:
        return None
    runs = found.runs
    names: list[str] = []
    owner_of_run: list[int] = []
    last: tuple[str, int] | None = None
    for run in runs:
        if len(run.records) != run.n_docs * DOC_RECORD.itemsize or len(run.lists) != len(terms):
            raise ValueError(f"the search rows of thread {run.thread_id!r} are damaged")
        if last is None or last[0] != run.thread_id:
            names.append(run.thread_id)
        elif run.first_doc < last[1]:
            raise ValueError(f"the search rows of thread {run.thread_id!r} overlap")
        last = (run.thread_id, run.first_doc + run.n_docs)
        owner_of_run.append(len(names) - 1)
    sizes = np.fromiter((r.n_docs for r in runs), np.int64, len(runs))
    bases = np.zeros(len(runs) + 1, np.int64)
    np.cumsum(sizes, out=bases[1:])
    n = int(bases[-1])
    recs = np.frombuffer(b"".join(r.records for r in runs), DOC_RECORD)
    owner = np.repeat(np.array(owner_of_run, np.uint32), sizes)
    seqs = recs["seq"]
    if n > 1:
        same = owner[1:] == owner[:-1]
        if not bool(np.all(seqs[1:][same] > seqs[:-1][same])):
            raise ValueError("the server's search rows hold a thread's seqs out of order")
    postings = {t: _postings(runs, j, bases, sizes) for j, t in enumerate(terms)}
    key = np.zeros(len(names), np.int64)
    key[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return Corpus(
        "",
        [WidePart(n, postings)],
        seqs,
        recs["len"],
        recs["kind"],
        recs["role"],
        n,
        ordered=True,
        threads=(names, owner, key),
        n_docs=found.docs,
        total_length=found.total_length,
    )


def _postings(
    runs: Sequence[WideRun], j: int, bases: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]
) -> _Arrays:
    """Term ``j``'s postings over the sent documents (ascending), from its lists in every run:
    (u16 run-relative ordinal, u16 count) pairs, decoded all at once."""
    at = [i for i, r in enumerate(runs) if r.lists[j] is not None]
    raws = [runs[i].lists[j] or b"" for i in at]
    lengths = np.fromiter(map(len, raws), np.int64, len(raws))
    if bool(np.any(lengths % 4)) or bool(np.any(lengths == 0)):
        raise ValueError("a postings list of the server's search index is damaged")
    counts = lengths // 4
    pairs = np.frombuffer(b"".join(raws), "<u2").reshape(-1, 2)
    rel = pairs[:, 0].astype(np.int64)
    index = np.array(at, np.int64)
    if bool(np.any(rel >= np.repeat(sizes[index], counts))):
        raise ValueError("a postings list of the server's search index names no document")
    docs = rel + np.repeat(bases[index], counts)
    if len(docs) > 1 and not bool(np.all(docs[1:] > docs[:-1])):
        raise ValueError("a postings list of the server's search index is out of order")
    return docs.astype(np.uint32), pairs[:, 1].astype(np.uint16)
