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
from continuity.store.base import WideSearch

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


def _list(raw: bytes, n_docs: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
    width = 1 if n_docs <= 256 else 2
    m = len(raw) // (width + 2)
    if m * (width + 2) != len(raw) or m == 0:
        raise ValueError("a postings list of the server's search index is damaged")
    ords = np.frombuffer(raw, "u1" if width == 1 else "<u2", m).astype(np.uint32)
    tfs = np.frombuffer(raw, "<u2", m, offset=m * width).astype(np.uint16)
    if int(ords[-1]) >= n_docs or (m > 1 and not bool(np.all(ords[1:] > ords[:-1]))):
        raise ValueError("a postings list of the server's search index is out of order")
    return ords, tfs


def wide_corpus(found: WideSearch, terms: Sequence[str]) -> Corpus | None:
    """The corpus of what the server sent for ``terms`` (None: the scope has no document).
    :class:`ValueError` when the rows do not hold together (the index is damaged)."""
    if not found.docs:
        return None
    names: list[str] = []
    thread_of: list[npt.NDArray[np.uint32]] = []
    records: list[bytes] = []
    pieces: dict[str, tuple[list[npt.NDArray[np.uint32]], list[npt.NDArray[np.uint16]]]] = {}
    base = 0
    last: tuple[str, int] | None = None
    for run in found.runs:
        if len(run.records) != run.n_docs * DOC_RECORD.itemsize or len(run.lists) != len(terms):
            raise ValueError(f"the search rows of thread {run.thread_id!r} are damaged")
        if last is None or last[0] != run.thread_id:
            names.append(run.thread_id)
        elif run.first_doc < last[1]:
            raise ValueError(f"the search rows of thread {run.thread_id!r} overlap")
        last = (run.thread_id, run.first_doc + run.n_docs)
        thread_of.append(np.full(run.n_docs, len(names) - 1, np.uint32))
        records.append(run.records)
        for term, raw in zip(terms, run.lists, strict=True):
            if raw is None:
                continue
            ords, tfs = _list(raw, run.n_docs)
            entry = pieces.setdefault(term, ([], []))
            entry[0].append(ords + np.uint32(base))
            entry[1].append(tfs)
        base += run.n_docs
    recs = np.frombuffer(b"".join(records), DOC_RECORD)
    owner = np.concatenate(thread_of) if thread_of else np.zeros(0, np.uint32)
    seqs = recs["seq"]
    if len(seqs) > 1:
        same = owner[1:] == owner[:-1]
        if not bool(np.all(seqs[1:][same] > seqs[:-1][same])):
            raise ValueError("the server's search rows hold a thread's seqs out of order")
    postings = {
        t: (np.concatenate(o), np.concatenate(f)) if len(o) > 1 else (o[0], f[0])
        for t, (o, f) in pieces.items()
    }
    key = np.zeros(len(names), np.int64)
    key[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return Corpus(
        "",
        [WidePart(base, postings)],
        seqs,
        recs["len"],
        recs["kind"],
        recs["role"],
        base,
        ordered=True,
        threads=(names, owner, key),
        n_docs=found.docs,
        total_length=found.total_length,
    )
