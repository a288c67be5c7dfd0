"""Records and retractions of a thread as lookups, kept current without reading the log again.

:class:`Marks` answers "the latest record of kind K (and key X) at or before seq N" and "which
messages are retracted as of seq N" from the marks projection (``marks.v1.jsonl`` for a store
with caches, the frames themselves for one without). ``continuity.caches.live.marks_of`` keeps
one per thread in the process and brings it up to date by reading only what was added since.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator

from continuity.store.derived import CheckpointEntry, DerivedIndex, MarkEntry

__all__ = ["DerivedMarks", "Marks", "is_in", "merge_spans"]


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans sorted and merged where they overlap or touch."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


class Marks:
    """The records and retractions of one thread, in log order."""

    def __init__(self, entries: Iterable[MarkEntry] = ()) -> None:
        self._by_key: dict[tuple[str, str], list[int]] = {}
        self._by_kind: dict[str, list[int]] = {}
        self._retractions: list[tuple[int, list[tuple[int, int]]]] = []
        self._retraction_seqs: list[int] = []
        self.last_seq = -1
        """The seq of the last entry added (-1: none)."""
        self.add(entries)

    def add(self, entries: Iterable[MarkEntry]) -> None:
        """Add entries that come after every entry already here, in log order."""
        for e in entries:
            if e.seq <= self.last_seq:
                raise ValueError(f"mark at seq {e.seq} is not after seq {self.last_seq}")
            self.last_seq = e.seq
            if e.type == "record":
                self._by_key.setdefault((e.kind, e.key), []).append(e.seq)
                self._by_kind.setdefault(e.kind, []).append(e.seq)
            elif e.type == "retraction":
                self._retractions.append((e.seq, list(e.spans)))
                self._retraction_seqs.append(e.seq)

    # -- records --

    def _seqs(self, kind: str, key: str | None) -> list[int]:
        if key is None:
            return self._by_kind.get(kind, [])
        return self._by_key.get((kind, key), [])

    def latest_record(
        self, kind: str, key: str | None = None, at_or_before: int | None = None
    ) -> int | None:
        """The seq of the latest record of ``kind`` (with ``key``, when given) at or before
        ``at_or_before`` (default: the end), or None."""
        seqs = self._seqs(kind, key)
        i = len(seqs) if at_or_before is None else bisect_right(seqs, at_or_before)
        return seqs[i - 1] if i else None

    def record_seqs(
        self, kind: str, key: str | None = None, at_or_before: int | None = None
    ) -> Iterator[int]:
        """The seqs of the records of ``kind`` (and ``key``) at or before ``at_or_before``,
        newest first."""
        seqs = self._seqs(kind, key)
        i = len(seqs) if at_or_before is None else bisect_right(seqs, at_or_before)
        return (seqs[j] for j in range(i - 1, -1, -1))

    def record_kinds(self) -> list[str]:
        return sorted(self._by_kind)

    # -- retractions --

    def retractions(self, anchor_seq: int | None = None) -> list[tuple[int, list[tuple[int, int]]]]:
        """(seq of the retraction frame, its spans) for each retraction at or before the
        anchor, in log order."""
        if anchor_seq is None:
            return list(self._retractions)
        return self._retractions[: bisect_right(self._retraction_seqs, anchor_seq)]

    def retracted(self, anchor_seq: int | None = None) -> list[tuple[int, int]]:
        """The retracted seqs as of the anchor: sorted, merged spans."""
        return merge_spans(s for _, spans in self.retractions(anchor_seq) for s in spans)

    def invalidated(
        self, checkpoints: Iterable[CheckpointEntry], anchor_seq: int | None = None
    ) -> dict[str, int]:
        """The checkpoints a retraction at or before the anchor took back — made before it and
        covering a message it retracts (a cumulative summary covers 0..to_seq) — each with the
        seq of the first retraction that did (ADR 0018)."""
        retractions = self.retractions(anchor_seq)
        if not retractions:
            return {}
        gone: dict[str, int] = {}
        for c in checkpoints:
            for r_seq, spans in retractions:
                if c.seq < r_seq and any(lo <= c.to_seq for lo, _ in spans):
                    gone[c.checkpoint_id] = r_seq
                    break
        return gone

    def has_retractions(self, anchor_seq: int | None = None) -> bool:
        if not self._retraction_seqs:
            return False
        return anchor_seq is None or self._retraction_seqs[0] <= anchor_seq


class DerivedMarks(Marks):
    """The marks of a thread whose backend keeps them as indexed rows
    (:class:`~continuity.store.derived.DerivedIndex`), as of ``head``: its retractions read in
    one query (they are few), its records looked up when asked (they may be many), so taking
    it costs O(retractions), not O(records)."""

    _PAGE = 64

    def __init__(self, derived: DerivedIndex, head: int) -> None:
        retractions, last = derived.retractions(head)
        super().__init__(retractions)
        self.last_seq = last
        self._derived = derived
        self._head = head

    def add(self, entries: Iterable[MarkEntry]) -> None:
        if hasattr(self, "_derived"):
            raise TypeError("DerivedMarks are read from the backend's rows, not added to")
        super().add(entries)

    def _bound(self, at_or_before: int | None) -> int:
        return self._head if at_or_before is None else min(at_or_before, self._head)

    def latest_record(
        self, kind: str, key: str | None = None, at_or_before: int | None = None
    ) -> int | None:
        found = self._derived.record_seqs(kind, key, self._bound(at_or_before), 1)
        return found[0] if found else None

    def record_seqs(
        self, kind: str, key: str | None = None, at_or_before: int | None = None
    ) -> Iterator[int]:
        bound = self._bound(at_or_before)
        page = self._PAGE
        while bound >= 0:
            found = self._derived.record_seqs(kind, key, bound, page)
            yield from found
            if len(found) < page:
                return
            bound = found[-1] - 1
            page = min(page * 4, 4096)

    def record_kinds(self) -> list[str]:
        return self._derived.record_kinds(self._head)


def is_in(spans: list[tuple[int, int]], seq: int) -> bool:
    """Whether ``seq`` lies in one of the sorted, merged ``spans``."""
    i = bisect_right(spans, (seq, 1 << 62)) - 1
    return i >= 0 and spans[i][0] <= seq <= spans[i][1]
